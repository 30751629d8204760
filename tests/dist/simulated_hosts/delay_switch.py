#!/usr/bin/env python3
"""A switch with a delay line, for simulated_hosts.sh on kernels without tc's netem.

Owns the switch side of each host's link: one tap device per host (the host sees it as its
eth0), Ethernet frames forwarded by learned source address (unknown and broadcast ones to
every other port), each frame handed on `--delay` after it arrived, in order per port. Does
not shape the rate (tc's tbf on the hosts' interfaces does) and never touches another device.

  delay_switch.py --delay-us 2000 --ready FILE TAP...

Attaches to the taps (made beforehand, persistent, in its own namespace), writes FILE once it
holds them all (the script then moves each tap into its host's namespace), and runs until killed.
"""
import argparse
import fcntl
import heapq
import os
import select
import struct
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-us", type=float, required=True)
    parser.add_argument("--ready", required=True)
    parser.add_argument("taps", nargs="+")
    args = parser.parse_args()
    delay = args.delay_us / 1e6
    ports = [open_tap(name) for name in args.taps]
    with open(args.ready, "w") as ready:
        ready.write("ready\n")

    where = {}  # source MAC -> port it was last seen on
    due = []  # (time to send, sequence, port, frame): a heap; the sequence keeps arrival order
    sequence = 0
    poller = select.poll()
    for fd in ports:
        poller.register(fd, select.POLLIN)
    while True:
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, port, frame = heapq.heappop(due)
            try:
                os.write(port, frame)
            except (BlockingIOError, OSError):
                pass  # a full or downed host interface drops the frame, as a wire would
        timeout_ms = None if not due else max(0.0, (due[0][0] - time.monotonic()) * 1e3)
        for fd, _ in poller.poll(timeout_ms):
            # Several frames per wake-up: a burst costs one poll.
            for _ in range(64):
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(frame) < 14:
                    continue
                arrived = time.monotonic()
                where[frame[6:12]] = fd
                destination = where.get(frame[0:6]) if not frame[0] & 1 else None
                targets = [destination] if destination is not None else [p for p in ports if p != fd]
                for port in targets:
                    if port == fd:
                        continue
                    heapq.heappush(due, (arrived + delay, sequence, port, frame))
                    sequence += 1


if __name__ == "__main__":
    main()
