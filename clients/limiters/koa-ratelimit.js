// clients/limiters/koa-ratelimit.js ADDR: koa-ratelimit 6.0.0 (its redis driver is
// async-ratelimiter 1.6.10, a sliding log in a sorted set) over ioredis, as koa-ratelimit's
// README sets it up, in a Koa 3 app on 127.0.0.1 hit by fetch: 3 requests per 4 s per path.
// Then async-ratelimiter's get, with and without peek, directly. Prints one JSON line per
// call; integration/limiters_test.go runs it against redis-server and against Ratchet and
// compares the lines (fields ending in _ms within 1 s, in _s within 2 s).
//
// What it sends: ioredis defineCommand, so EVALSHA ad00ff6f... 1 limit:<id> <now ms, a
// fraction> <duration ms> <max> <peek 0|1>, EVAL of the text on NOSCRIPT. The script calls
// EXISTS, ZREMRANGEBYSCORE, ZCARD, ZRANGE, ZADD (the member is the time as Lua prints it),
// ZREMRANGEBYRANK and PEXPIRE. No native path: the interpreter runs it.
const http = require("node:http");
const Redis = require("ioredis");
const Koa = require("koa");
const ratelimit = require("koa-ratelimit");
const Limiter = require("async-ratelimiter");

const duration = 4_000;
const max = 3;

const started = Date.now();

function print(op, fields) {
  console.log(JSON.stringify({ op, ...fields, elapsed_ms: Date.now() - started }));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// reset_s: the X-RateLimit-Reset header (epoch seconds, rounded down) as seconds from now.
async function hit(base, path) {
  const res = await fetch(base + path);
  await res.text();
  if (res.status !== 200 && res.status !== 429) throw new Error(`GET ${path}: HTTP ${res.status}`);
  const h = (k) => (res.headers.get(k) === null ? null : Number(res.headers.get(k)));
  const reset = h("x-ratelimit-reset");
  print("request", {
    path, status: res.status, limit: h("x-ratelimit-limit"), remaining: h("x-ratelimit-remaining"),
    reset_s: reset === null ? null : reset - Date.now() / 1000, retry_after_s: h("retry-after"),
  });
}

async function main([addr]) {
  const i = addr ? addr.lastIndexOf(":") : -1;
  if (i < 0) throw new Error("usage: koa-ratelimit.js HOST:PORT");
  const db = new Redis({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)), maxRetriesPerRequest: 0, lazyConnect: true });
  await db.connect();
  const app = new Koa();
  app.use(ratelimit({ driver: "redis", db, duration, max, id: (ctx) => ctx.path.slice(1) }));
  app.use((ctx) => {
    ctx.body = "ok";
  });
  const server = http.createServer(app.callback());
  await new Promise((resolve, reject) => server.listen(0, "127.0.0.1", resolve).on("error", reject));
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    // The sleeps make the decisions the same however slowly each call runs: an entry that
    // must have left the window has, by the sleeps alone; one that must not has 1.6 s left.
    for (let n = 0; n < 4; n++) await hit(base, "/a");
    await hit(base, "/b");
    await sleep(2_000);
    for (let n = 0; n < 3; n++) await hit(base, "/b"); // the third: the first /b is still in
    await sleep(2_400);
    await hit(base, "/a"); // /a's log has expired (PEXPIRE of the duration at its last write)
    await hit(base, "/b"); // the first /b has left the window, the next two have not

    // The limiter alone: peek reads without adding; a max of 2 trims the log to 2 entries.
    const limiter = new Limiter({ db, max: 2, duration: 5_000, namespace: "direct" });
    const show = async (op, o) => {
      const r = await limiter.get(o);
      print(op, { remaining: r.remaining, total: r.total, reset_s: r.reset - Date.now() / 1000 });
    };
    await show("peek", { id: "x", peek: true });
    for (let n = 0; n < 3; n++) await show("get", { id: "x" });
    await show("peek", { id: "x", peek: true });
    await show("get-max-5", { id: "x", max: 5 });
    await show("get-max-5", { id: "x", max: 5 });
    await show("get-max-1", { id: "x", max: 1 });
    // Each member is the time the script was given, as redis.call passes a Lua number (%.17g),
    // which is also how ZSCORE prints its score.
    const log = await db.zrange("direct:x", 0, -1, "WITHSCORES");
    let memberIsScore = true;
    for (let j = 0; j < log.length; j += 2) memberIsScore &&= log[j] === log[j + 1];
    print("log", { entries: log.length / 2, member_is_score: memberIsScore, ttl_ms: await db.pttl("direct:x") });
  } finally {
    server.close();
    db.disconnect();
  }
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exit(1);
});
