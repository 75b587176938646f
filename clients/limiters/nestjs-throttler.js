// clients/limiters/nestjs-throttler.js ADDR [PACKAGE]: @nestjs/throttler 6.7.1's ThrottlerGuard
// with a Redis storage over ioredis, wired by Nest's dependency injection as the storage's
// README sets it up (ThrottlerModule.forRoot({ throttlers, storage })). PACKAGE is
// @nest-lab/throttler-storage-redis (1.2.0, the default) or nestjs-throttler-storage-redis
// (0.5.1): the same Lua text, SHA1 f1e0da9c..., which Ratchet has no native path for, so it
// runs on the interpreter. The guard is called as Nest calls it for an HTTP request (an
// ExecutionContextHost over a request and a response that records headers, as an express
// response would take them); then the storage's increment directly. Prints one JSON line per call; integration/limiters_test.go
// runs it against redis-server and against Ratchet and compares the lines (fields ending in
// _ms within 1 s, in _s within 2 s).
//
// What it sends: EVAL <script> 2 {key:name}:hits {key:name}:blocked name ttl limit
// blockDuration, for every throttler of every request (INCR, PTTL, PEXPIRE, GET, SET PX, DEL
// inside the script).
require("reflect-metadata");
const fs = require("node:fs");
const path = require("node:path");
const Redis = require("ioredis");
const { Module } = require("@nestjs/common");
const { NestFactory } = require("@nestjs/core");
const { ExecutionContextHost } = require("@nestjs/core/helpers/execution-context-host");
const { ThrottlerModule, ThrottlerGuard, ThrottlerStorage } = require("@nestjs/throttler");

const packages = ["@nest-lab/throttler-storage-redis", "nestjs-throttler-storage-redis"];

const started = Date.now();

function print(op, fields) {
  console.log(JSON.stringify({ op, ...fields, elapsed_ms: Date.now() - started }));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A controller whose handler the guard sees: the key is derived from its class and handler
// names and the tracker (the request's ip).
class ApiController {
  hello() {
    return "ok";
  }
}

// request runs the guard as Nest runs it before ApiController.hello for a request from ip:
// allowed, or denied with ThrottlerException (HTTP 429); the headers it set.
async function request(guard, ip) {
  const headers = {};
  const req = { ip, ips: [], headers: {}, url: "/hello", method: "GET" };
  const res = { header: (k, v) => (headers[k.toLowerCase()] = v) };
  const ctx = new ExecutionContextHost([req, res, () => {}], ApiController, ApiController.prototype.hello);
  ctx.setType("http");
  let status = 200;
  try {
    if (!(await guard.canActivate(ctx))) status = 403;
  } catch (err) {
    if (typeof err.getStatus !== "function") throw err;
    status = err.getStatus();
  }
  print("request", {
    ip, status,
    limit: num(headers["x-ratelimit-limit"]), remaining: num(headers["x-ratelimit-remaining"]),
    reset_s: num(headers["x-ratelimit-reset"]), retry_after_s: num(headers["retry-after"]),
    burst_remaining: num(headers["x-ratelimit-remaining-burst"]),
    burst_retry_after_s: num(headers["retry-after-burst"]),
  });
}

function num(v) {
  return v === undefined ? null : Number(v);
}

async function main([addr, pkg = packages[0]]) {
  const i = addr ? addr.lastIndexOf(":") : -1;
  if (i < 0 || !packages.includes(pkg)) {
    throw new Error(`usage: nestjs-throttler.js HOST:PORT [${packages.join("|")}]`);
  }
  const { ThrottlerStorageRedisService } = require(pkg);
  const manifest = path.join(__dirname, "..", "node_modules", pkg, "package.json");
  print("version", { package: pkg, version: JSON.parse(fs.readFileSync(manifest, "utf8")).version });

  const redis = new Redis({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)), maxRetriesPerRequest: 0, lazyConnect: true });
  await redis.connect();
  // The guard runs its throttlers shortest ttl first: burst, 2 per 2 s, blocked for 4 s once
  // past it; then default, 3 per 60 s (blocked for 60 s). A request burst refuses does not
  // count in default.
  class AppModule {}
  Module({
    imports: [ThrottlerModule.forRoot({
      throttlers: [{ name: "default", ttl: 60_000, limit: 3 }, { name: "burst", ttl: 2_000, limit: 2, blockDuration: 4_000 }],
      storage: new ThrottlerStorageRedisService(redis),
    })],
    providers: [ThrottlerGuard],
  })(AppModule);
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  try {
    const guard = app.get(ThrottlerGuard);
    // The sleeps make the decisions the same however slowly each call runs: a window or a
    // block that must have ended has, by the sleeps alone; one that must not has seconds left.
    for (let n = 0; n < 4; n++) await request(guard, "10.0.0.1");
    await request(guard, "10.0.0.2");
    await sleep(2_100); // burst's hits keys have ended; 10.0.0.1's block has not
    await request(guard, "10.0.0.2");
    await request(guard, "10.0.0.1");
    // 10.0.0.1's block (4 s from its third request) has ended, and so have the burst hits
    // of the requests at 2.1 s (2 s): by half a second, not by a few ms a loaded machine
    // could eat (2 s here left 50 ms, and the two servers then differed).
    await sleep(2_500);
    await request(guard, "10.0.0.1"); // default's third
    await request(guard, "10.0.0.1"); // default's fourth: blocked for 60 s

    // The storage alone, as a guard of another app would call it: 2 per 5 s, blocked 0.7 s.
    const storage = app.get(ThrottlerStorage);
    const increment = async (key) => {
      const r = await storage.increment(key, 5_000, 2, 700, "custom");
      print("increment", { key, hits: r.totalHits, expire_s: r.timeToExpire, blocked: r.isBlocked, block_s: r.timeToBlockExpire });
    };
    for (let n = 0; n < 3; n++) await increment("direct");
    await sleep(800); // the block has ended: the next is over the limit, blocked again
    await increment("direct");
    // A block key without a TTL (PTTL -1): the script deletes it and starts the count again.
    await redis.set(`${redis.options.keyPrefix ?? ""}{manual:custom}:blocked`, "1");
    await increment("manual");
    await increment("manual");
    print("keys", { keys: (await redis.keys("*custom*")).sort() });
  } finally {
    await app.close();
    redis.disconnect();
  }
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exit(1);
});
