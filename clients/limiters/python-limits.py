"""clients/limiters/python-limits.py ADDR STRATEGY: the Python `limits` library (Flask-Limiter's
backend; Debian's python3-limits) over redis-py, limit 3 per minute.

STRATEGY is fixed-window (Flask-Limiter's default), fixed-window-elastic-expiry or
moving-window. Prints one JSON line per call; integration/limiters_test.go runs it against
redis-server and against Ratchet and compares the lines (fields ending in _s within 2 s).

What limits 2.8 sends: fixed window: EVALSHA 628bd136... (incr_expire) KEYS[1]=key ARGV=expiry
amount, GET, TTL, DEL; elastic expiry: INCRBY + EXPIRE, GET, TTL, DEL; moving window:
EVALSHA d19f37c1... (acquire_moving_window) and 3136f002... (moving_window) over a LIST, with
the client's time.time(). redis-py's Script: EVALSHA, on NOSCRIPT SCRIPT LOAD then EVALSHA.
"""

import json
import sys
import time

import limits
from limits.storage import RedisStorage
from limits.strategies import (
    FixedWindowElasticExpiryRateLimiter,
    FixedWindowRateLimiter,
    MovingWindowRateLimiter,
)

STRATEGIES = {
    "fixed-window": FixedWindowRateLimiter,
    "fixed-window-elastic-expiry": FixedWindowElasticExpiryRateLimiter,
    "moving-window": MovingWindowRateLimiter,
}


# elapsed_ms: when the call ended, from the start; the test widens its tolerance by how much
# the two runs' timings differ.
STARTED = time.monotonic()


def line(op, **fields):
    elapsed_ms = round((time.monotonic() - STARTED) * 1000)
    print(json.dumps({"op": op, **fields, "elapsed_ms": elapsed_ms}), flush=True)


def stats(limiter, item, *ids):
    reset, remaining = limiter.get_window_stats(item, *ids)
    line("stats", remaining=remaining, reset_in_s=round(reset - time.time()))


def main(argv):
    if len(argv) != 2 or argv[1] not in STRATEGIES:
        sys.exit("usage: python-limits.py HOST:PORT " + "|".join(STRATEGIES))
    addr, strategy = argv
    storage = RedisStorage("redis://" + addr, socket_timeout=10)
    limiter = STRATEGIES[strategy](storage)
    item = limits.parse("3/minute")
    ids = ("scenario", strategy)
    line("version", limits=limits.__version__)
    for _ in range(5):
        line("hit", allowed=limiter.hit(item, *ids))
    line("test", allowed=limiter.test(item, *ids))
    stats(limiter, item, *ids)
    line("hit", other=True, allowed=limiter.hit(item, "other", strategy))
    limiter.clear(item, *ids)
    line("clear")
    line("test", allowed=limiter.test(item, *ids))
    stats(limiter, item, *ids)
    line("hit", cost=2, allowed=limiter.hit(item, *ids, cost=2))
    line("hit", cost=2, allowed=limiter.hit(item, *ids, cost=2))
    line("hit", allowed=limiter.hit(item, *ids))
    stats(limiter, item, *ids)
    # After SCRIPT FLUSH redis-py's EVALSHA meets NOSCRIPT on redis-server and loads the
    # script again; on Ratchet the known scripts always exist. Decisions must not change.
    line("script-flush", reply=bool(storage.storage.script_flush()))
    line("hit", allowed=limiter.hit(item, *ids))
    stats(limiter, item, *ids)
    limiter.clear(item, *ids)
    line("clear")


if __name__ == "__main__":
    main(sys.argv[1:])
