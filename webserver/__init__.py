"""The web server run on the receiver for web-fetch experiments."""
