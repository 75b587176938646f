// clients/tracking/node-redis-csc.js ADDR KEY ROUNDS: node-redis 5's clientSideCache
// (RESP3, CLIENT TRACKING ON) after another client's writes (integration/tracking_test.go).
// Each round another client SETs KEY to the round's number; the cached client GETs it
// until it reads that number (a stale read would go on for ever without invalidation:
// the cache has no TTL), then twice more, from its cache. Prints one JSON line.
const { createClient, BasicClientSideCache } = require("redis");

async function main(addr, key, rounds) {
  const cache = new BasicClientSideCache({ ttl: 0, maxEntries: 0 });
  const cached = createClient({ url: `redis://${addr}`, RESP: 3, clientSideCache: cache });
  const writer = createClient({ url: `redis://${addr}` });
  for (const c of [cached, writer]) c.on("error", (err) => console.error(err));
  await cached.connect();
  await writer.connect();
  let staleReads = 0;
  try {
    for (let i = 1; i <= rounds; i++) {
      await writer.set(key, String(i));
      const deadline = Date.now() + 20000;
      for (;;) {
        const v = await cached.get(key);
        if (v === String(i)) break;
        staleReads++;
        if (Date.now() > deadline) {
          throw new Error(`round ${i}: still reading ${JSON.stringify(v)} 20 s after another client's SET`);
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      for (let j = 0; j < 2; j++) {
        const v = await cached.get(key);
        if (v !== String(i)) throw new Error(`round ${i}: read ${JSON.stringify(v)} after reading ${i}`);
      }
    }
    const st = cache.stats();
    console.log(JSON.stringify({ rounds, hits: st.hitCount, misses: st.missCount, staleReads }));
  } finally {
    await cached.close();
    await writer.close();
  }
}

main(process.argv[2], process.argv[3], Number(process.argv[4])).catch((err) => {
  console.error(err);
  process.exit(1);
});
