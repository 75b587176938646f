// clients/limiters/rate-limiter-flexible.js ADDR ioredis|node-redis: rate-limiter-flexible's
// RateLimiterRedis (points 5 per 60 s) over ioredis or node-redis, as its README sets it up.
// Prints one JSON line per call; integration/limiters_test.go runs it against redis-server
// and against Ratchet and compares the lines (fields ending in _ms within 1 s).
//
// What it sends: consume = the incrTtl script (ioredis: EVAL on first use, then EVALSHA
// a1de965f...; node-redis: EVAL of the text every call), get = MULTI GET PTTL EXEC,
// block = MULTI SET EX PTTL EXEC, delete = DEL.
const { RateLimiterRedis } = require("rate-limiter-flexible");

// elapsed_ms: when the call ended, from the start; the test widens its tolerance by how
// much the two runs' timings differ.
const started = Date.now();

// res is a RateLimiterRes (or null from get() when the key is absent).
function line(op, fields, res) {
  const out = { op, ...fields };
  if (res) {
    out.consumed = res.consumedPoints;
    out.remaining = res.remainingPoints;
    out.first = res.isFirstInDuration;
    out.before_next_ms = res.msBeforeNext;
  } else if (res === null) {
    out.absent = true;
  }
  out.elapsed_ms = Date.now() - started;
  console.log(JSON.stringify(out));
}

// consume returns the decision: resolved = allowed, rejected with a RateLimiterRes = denied;
// any other rejection (an Error) is a failure of the store and is thrown.
async function consume(limiter, key, points) {
  try {
    line("consume", { points, allowed: true }, await limiter.consume(key, points));
  } catch (err) {
    if (err instanceof Error) throw err;
    line("consume", { points, allowed: false }, err);
  }
}

async function scenario(limiter, key) {
  for (let i = 0; i < 7; i++) await consume(limiter, key, 1);
  line("get", {}, await limiter.get(key));
  line("delete", { deleted: await limiter.delete(key) });
  line("get", {}, await limiter.get(key));
  await consume(limiter, key, 1);
  await consume(limiter, key, 3);
  await consume(limiter, key, 2);
  line("penalty", {}, await limiter.penalty(key, 1));
  line("reward", {}, await limiter.reward(key, 2));
  line("get", {}, await limiter.get(key));
  line("block", {}, await limiter.block(key, 10));
  await consume(limiter, key, 1);
  line("get", {}, await limiter.get(key));
  line("delete", { deleted: await limiter.delete(key) });
  line("delete", { deleted: await limiter.delete(key) });
}

async function withIoredis(host, port) {
  const Redis = require("ioredis");
  const client = new Redis({ host, port, enableOfflineQueue: true, maxRetriesPerRequest: 0 });
  try {
    const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix: "rlflx-ioredis", points: 5, duration: 60 });
    await scenario(limiter, "user:1");
  } finally {
    client.disconnect();
  }
}

async function withNodeRedis(host, port) {
  const { createClient } = require("redis");
  const client = createClient({ socket: { host, port, reconnectStrategy: false } });
  client.on("error", () => {}); // surfaced by the rejected command instead
  await client.connect();
  try {
    const limiter = new RateLimiterRedis({
      storeClient: client, useRedisPackage: true, keyPrefix: "rlflx-node-redis", points: 5, duration: 60,
    });
    await scenario(limiter, "user:1");
  } finally {
    await client.quit();
  }
}

async function main([addr, which]) {
  const i = addr ? addr.lastIndexOf(":") : -1;
  if (i < 0 || !["ioredis", "node-redis"].includes(which)) {
    throw new Error("usage: rate-limiter-flexible.js HOST:PORT ioredis|node-redis");
  }
  const host = addr.slice(0, i);
  const port = Number(addr.slice(i + 1));
  await (which === "ioredis" ? withIoredis(host, port) : withNodeRedis(host, port));
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exit(1);
});
