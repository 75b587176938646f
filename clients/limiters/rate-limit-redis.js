// clients/limiters/rate-limit-redis.js ADDR [PACKAGE]: express-rate-limit with rate-limit-redis's
// RedisStore over node-redis, as rate-limit-redis's README sets it up, limit 3 per 60 s.
// A tiny express app on 127.0.0.1 is hit by fetch; then the store's get, decrement and
// resetKey are called directly. PACKAGE is rate-limit-redis (5.0.0, the default) or
// rate-limit-redis-6 (6.0.1, whose increment script is another text). Prints one JSON line per call; integration/limiters_test.go
// runs it against redis-server and against Ratchet and compares the lines (fields ending in
// _ms within 1 s, in _s within 2 s).
//
// What it sends: SCRIPT LOAD of its increment and get scripts at init, EVALSHA 81dbecea...
// (increment) and 6aeb97ed... (get), on any error SCRIPT LOAD again and EVALSHA; DECR; DEL.
// 6.0.1: increment 895b92e1... with ARGV windowMs only (no resetExpiryOnChange, which it
// ignores), reloaded on NOSCRIPT only.
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");
const express = require("express");
const { rateLimit } = require("express-rate-limit");
const { createClient } = require("redis");

const windowMs = 60_000;
const limit = 3;

// elapsed_ms: when the call ended, from the start; the test widens its tolerance by how
// much the two runs' timings differ.
const started = Date.now();

function print(op, fields) {
  console.log(JSON.stringify({ op, ...fields, elapsed_ms: Date.now() - started }));
}

// info prints a ClientRateLimitInfo (undefined fields when the key is absent).
function info(op, i) {
  const hits = Number.isFinite(i.totalHits) ? i.totalHits : null;
  print(op, { hits, reset_in_ms: i.resetTime ? i.resetTime.getTime() - Date.now() : null });
}

// The RateLimit header of draft-7: "limit=3, remaining=2, reset=60".
function parseRateLimit(h) {
  const out = {};
  for (const part of (h || "").split(",")) {
    const [k, v] = part.trim().split("=");
    if (k) out[k] = Number(v);
  }
  return out;
}

async function hit(base, path) {
  const res = await fetch(base + path);
  const body = await res.text();
  if (res.status !== 200 && res.status !== 429) {
    // express-rate-limit answers 500 when its store fails (passOnStoreError is false).
    throw new Error(`GET ${path}: HTTP ${res.status}: ${body.slice(0, 300)}`);
  }
  const rl = parseRateLimit(res.headers.get("ratelimit"));
  print("request", { path, status: res.status, limit: rl.limit, remaining: rl.remaining, reset_s: rl.reset });
}

async function main([addr, pkg = "rate-limit-redis"]) {
  const i = addr ? addr.lastIndexOf(":") : -1;
  if (i < 0 || !["rate-limit-redis", "rate-limit-redis-6"].includes(pkg)) {
    throw new Error("usage: rate-limit-redis.js HOST:PORT [rate-limit-redis|rate-limit-redis-6]");
  }
  const { RedisStore } = require(pkg);
  // The package's exports do not include package.json: read it from node_modules.
  const manifest = path.join(__dirname, "..", "node_modules", pkg, "package.json");
  print("version", { package: pkg, version: JSON.parse(fs.readFileSync(manifest, "utf8")).version });
  const client = createClient({ socket: { host: addr.slice(0, i), port: Number(addr.slice(i + 1)), reconnectStrategy: false } });
  client.on("error", () => {}); // surfaced by the rejected command instead
  await client.connect();
  const store = new RedisStore({ sendCommand: (...args) => client.sendCommand(args), prefix: "rl:scenario:" });
  const app = express();
  app.use(rateLimit({
    windowMs, limit, store, standardHeaders: "draft-7", legacyHeaders: false,
    keyGenerator: (req) => req.path.slice(1), // one key per path: "a" and "b"
  }));
  app.get("/:id", (req, res) => res.send("ok"));
  const server = http.createServer(app);
  await new Promise((resolve, reject) => server.listen(0, "127.0.0.1", resolve).on("error", reject));
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    for (let n = 0; n < 5; n++) await hit(base, "/a");
    await hit(base, "/b");
    info("get", await store.get("a"));
    await store.decrement("a");
    print("decrement", {});
    info("get", await store.get("a"));
    await store.resetKey("a");
    print("resetKey", {});
    info("get", await store.get("a"));
    await hit(base, "/a");
    // After SCRIPT FLUSH the store's EVALSHA fails on redis-server and it loads the script
    // again; on Ratchet the known scripts always exist. The decisions must be the same.
    print("script-flush", { reply: await client.sendCommand(["SCRIPT", "FLUSH"]) });
    await hit(base, "/a");
    info("get", await store.get("a"));
    info("increment", await store.increment("c"));

    // resetExpiryOnChange (5.x; 6.x refuses the option): every hit restarts the window.
    if (pkg === "rate-limit-redis") {
      const resetting = new RedisStore({
        sendCommand: (...args) => client.sendCommand(args), prefix: "rl:resetting:", resetExpiryOnChange: true,
      });
      await resetting.init({ windowMs: 5_000 });
      for (let n = 0; n < 3; n++) info("increment", await resetting.increment("a"));
      await resetting.decrement("a");
      info("get", await resetting.get("a"));
    }
  } finally {
    server.close();
    await client.quit();
  }
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exit(1);
});
