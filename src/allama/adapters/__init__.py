"""Sans-I/O adapters: a `ChatRequest` to an HTTP request, and an HTTP response back.

No sockets here, so every adapter can be tested byte for byte against recorded traffic.
"""
