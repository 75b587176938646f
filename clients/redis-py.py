# clients/redis-py.py ADDR: one RL.LIMIT, then two in one MULTI/EXEC, through redis-py.
import sys

import redis

host, port = sys.argv[1].rsplit(":", 1)
# RESP2 unless protocol=3 (redis-py 5 to 7); redis-py 8 speaks RESP3 by default.
r = redis.Redis(host=host, port=int(port))

# allowed, limit, remaining, retry_after_ms, reset_after_ms
allowed, limit, remaining, retry_after_ms, reset_after_ms = r.execute_command("RL.LIMIT", "user:42", 10, "1h")
print(allowed, limit, remaining, retry_after_ms, reset_after_ms)

# pipeline() is a transaction by default: MULTI, RL.LIMIT, RL.LIMIT, EXEC.
pipe = r.pipeline()
pipe.execute_command("RL.LIMIT", "user:42", 10, "1h")
pipe.execute_command("RL.LIMIT", "user:42", 10, "1h")
for reply in pipe.execute():
    print(*reply)
r.close()
