# clients/redis-py-two-limits.py ADDR: 10 a second and 1000 an hour for one API key, in
# one all-or-nothing RL.LIMIT, through redis-py.
import sys

import redis

host, port = sys.argv[1].rsplit(":", 1)
r = redis.Redis(host=host, port=int(port))

for _ in range(12):
    # The binding limit's allowed, limit, remaining, retry_after_ms, reset_after_ms: a
    # request the second's limit refuses is not counted in the hour either.
    allowed, limit, remaining, retry_after_ms, reset_after_ms = r.execute_command(
        "RL.LIMIT", "api:42", 10, "1s", 1000, "1h")
    print(allowed, limit, remaining, retry_after_ms)
r.close()
