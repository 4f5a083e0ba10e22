#!/usr/bin/env python3
"""Serves one file over HTTP on 127.0.0.1 as GitHub's raw host does for the RKI district file:
an ETag (size and modification time of the file, so replacing the file makes a new one),
Last-Modified, and `304 Not Modified` for a matching If-None-Match. Prints its port on the
first line, then one line per answer (`200 <bytes>` or `304`), for the benchmark to count.

Usage: serve.py FILE
"""
import email.utils
import http.server
import os
import sys

PATH = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        info = os.stat(PATH)
        etag = f'"{info.st_size}-{info.st_mtime_ns}"'
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            print("304", flush=True)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/csv")
        self.send_header("Content-Length", str(info.st_size))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", email.utils.formatdate(info.st_mtime, usegmt=True))
        self.end_headers()
        with open(PATH, "rb") as f:
            while chunk := f.read(1 << 16):
                self.wfile.write(chunk)
        print(f"200 {info.st_size}", flush=True)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
