/* bb-init: the project VM's initramfs, one static program (bufferbloat/vm/initrd.py).
 *
 * Debian's initramfs-tools spends ~5 s under TCG between the kernel's "Run /init" and
 * systemd (its udev, coldplug and settle, its shell scripts) to do what the project VM
 * needs in four steps: load the modules the root disk needs, wait for the disk, mount
 * it, switch to it. This program does those four, printing each, and nothing else:
 *
 *   1. devtmpfs on /dev (the console re-opened on it), proc on /proc;
 *   2. the kernel modules listed in /bb-init.modules, in that order (dependencies
 *      first: the list is made at image build from the image's modules.dep), each with
 *      finit_module(2); one already loaded or built in is fine;
 *   3. root= of the kernel command line (a /dev path) waited for (10 s at most),
 *      mounted with rootfstype= (ext4 by default), read-write unless "ro" is given;
 *   4. /dev moved onto the new root, /proc unmounted, the root moved over / and
 *      init= (/sbin/init by default) executed, with the arguments the kernel gave us.
 *
 * It refuses to run unless it is PID 1 (exit 2): run by hand, it would mount over /dev.
 * Any failure is printed as "bb-init: ..." with what to do, and the program exits: the
 * kernel panics, and with panic=-1 and -no-reboot qemu ends, so that the host reports
 * a failed boot with the console's tail instead of waiting for its bound.
 * BUFFERBLOAT_VM_INITRD=debian on the host boots Debian's initramfs instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MODULES_LIST "/bb-init.modules"
#define ROOT_WAIT_S 10

static double t0;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* one line on the console; errno as it was (a die() after it names the cause) */
static void say(const char *fmt, ...)
{
    int saved = errno;
    char buf[512];
    va_list ap;
    int n = snprintf(buf, sizeof buf, "bb-init: [%.3f s] ", now() - t0);
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof buf - n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2)
        n = sizeof buf - 2;
    buf[n++] = '\n';
    if (write(2, buf, n) < 0) { /* nowhere else to say it */ }
    errno = saved;
}

static void die(const char *what)
{
    say("FAILED: %s (%s); the host can boot Debian's initramfs instead: "
        "BUFFERBLOAT_VM_INITRD=debian", what, strerror(errno));
    exit(1);
}

/* the next word of the command line at *p (its length in *len; NULL at the end) */
static const char *next_word(const char **p, size_t *len)
{
    while (**p == ' ' || **p == '\n')
        (*p)++;
    if (!**p)
        return NULL;
    const char *w = *p;
    while (**p && **p != ' ' && **p != '\n')
        (*p)++;
    *len = *p - w;
    return w;
}

/* the value of word "key=" on the command line, copied into out (empty if absent) */
static void arg_value(const char *cmdline, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key), len;
    const char *p = cmdline, *w;
    out[0] = '\0';
    while ((w = next_word(&p, &len))) {
        if (len > klen && strncmp(w, key, klen) == 0 && w[klen] == '=') {
            size_t n = len - klen - 1;
            if (n >= size)
                n = size - 1;
            memcpy(out, w + klen + 1, n);
            out[n] = '\0';   /* the last one wins, as in the kernel */
        }
    }
}

static int has_word(const char *cmdline, const char *word)
{
    size_t want = strlen(word), len;
    const char *p = cmdline, *w;
    while ((w = next_word(&p, &len)))
        if (len == want && strncmp(w, word, len) == 0)
            return 1;
    return 0;
}

static void load_modules(void)
{
    FILE *f = fopen(MODULES_LIST, "r");
    char line[256];
    int n = 0;
    if (!f)
        die("cannot open " MODULES_LIST);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        int fd = open(line, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            say("cannot open module %s", line);
            die("a module of the root disk is missing");
        }
        if (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST) {
            say("cannot load module %s", line);
            die("finit_module");
        }
        close(fd);
        n++;
    }
    fclose(f);
    say("%d modules loaded", n);
}

int main(int argc, char **argv)
{
    char cmdline[4096] = "", root[256], fstype[64], init[256];
    (void)argc;
    t0 = now();
    if (getpid() != 1) {
        /* never on a running system: it would mount over its /dev */
        say("not PID 1: this is the project VM's initramfs, not a program to run");
        return 2;
    }
    if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) != 0 && errno != EBUSY)
        die("mount devtmpfs on /dev");
    int con = open("/dev/console", O_RDWR | O_NOCTTY);
    if (con >= 0) {
        dup2(con, 0);
        dup2(con, 1);
        dup2(con, 2);
        if (con > 2)
            close(con);
    }
    if (mount("proc", "/proc", "proc", 0, NULL) != 0)
        die("mount proc on /proc");
    int fd = open("/proc/cmdline", O_RDONLY);
    if (fd < 0)
        die("open /proc/cmdline");
    ssize_t got = read(fd, cmdline, sizeof cmdline - 1);
    close(fd);
    cmdline[got > 0 ? got : 0] = '\0';
    arg_value(cmdline, "root", root, sizeof root);
    arg_value(cmdline, "rootfstype", fstype, sizeof fstype);
    arg_value(cmdline, "init", init, sizeof init);
    if (!fstype[0])
        strcpy(fstype, "ext4");
    if (!init[0])
        strcpy(init, "/sbin/init");
    if (strncmp(root, "/dev/", 5) != 0) {
        errno = EINVAL;
        die("root= must name a /dev path");
    }
    say("the project VM's initramfs: root %s (%s), init %s", root, fstype, init);
    load_modules();

    struct stat st;
    double until = now() + ROOT_WAIT_S;
    while (stat(root, &st) != 0) {
        if (now() > until) {
            say("%s did not appear within %d s", root, ROOT_WAIT_S);
            die("no root disk");
        }
        usleep(10000);
    }
    unsigned long flags = has_word(cmdline, "ro") && !has_word(cmdline, "rw") ? MS_RDONLY : 0;
    if (mount(root, "/root", fstype, flags, NULL) != 0)
        die("mount the root disk");
    say("%s mounted %s", root, flags ? "read-only" : "read-write");
    if (mount("/dev", "/root/dev", NULL, MS_MOVE, NULL) != 0)
        die("move /dev onto the root");
    if (umount("/proc") != 0)
        die("unmount /proc");
    if (chdir("/root") != 0 || mount(".", "/", NULL, MS_MOVE, NULL) != 0 ||
        chroot(".") != 0 || chdir("/") != 0)
        die("switch to the root disk");
    say("switching to %s", init);
    argv[0] = init;
    execv(init, argv);
    die("exec init");
    return 1;
}
