// clients/limiters/bottleneck.js ADDR: bottleneck 2.19.5 clustering over ioredis, as its
// README sets it up: two limiters of one id share a reservoir and a concurrency bound
// through Redis (Lua scripts over hashes and sorted sets) and tell each other of new
// capacity through pub/sub (a script's PUBLISH, a SUBSCRIBE connection per limiter).
// Prints one JSON line per decision; integration/limiters_test.go runs it against
// redis-server and against Ratchet and compares the lines.
const Bottleneck = require("bottleneck");

const [host, port] = process.argv[2].split(":");
const id = "scenario";
let finished = false;

function limiter(name, extra) {
  const l = new Bottleneck({
    id, datastore: "ioredis", clientOptions: { host, port: Number(port) },
    clearDatastore: name === "a", ...extra,
    // No heartbeat within the scenario: a limiter learns of the other's freed capacity
    // only through pub/sub.
    heartbeatInterval: 60000,
  });
  l.on("error", (err) => {
    console.error(name, err);
    if (!finished) process.exitCode = 1; // once every line is out, teardown noise is not
  });
  return l;
}

// elapsed_ms: when the call ended, from the start (the test's timing tolerance).
const started = Date.now();

function line(op, fields) {
  console.log(JSON.stringify({ op, ...fields, elapsed_ms: Date.now() - started }));
}

// run schedules one job on l: allowed when it ran, denied when Bottleneck dropped it.
async function run(l, name) {
  try {
    await l.schedule(async () => name);
    line("schedule", { limiter: name, allowed: true });
  } catch (err) {
    if (!(err instanceof Bottleneck.BottleneckError)) throw err;
    line("schedule", { limiter: name, allowed: false, error: err.message });
  }
}

async function main() {
  // A reservoir of 3, no queue: a job past it is dropped (OVERFLOW with highWater 0).
  const opts = { reservoir: 3, maxConcurrent: 1, highWater: 0, strategy: Bottleneck.strategy.OVERFLOW };
  const a = limiter("a", opts);
  await a.ready();
  const b = limiter("b", opts);
  await b.ready();
  for (const [l, name] of [[a, "a"], [b, "b"], [a, "a"], [b, "b"], [a, "a"]]) await run(l, name);
  line("reservoir", { reservoir: await b.currentReservoir() });
  line("incrementReservoir", { reservoir: await a.incrementReservoir(2) });
  for (const [l, name] of [[b, "b"], [a, "a"], [b, "b"]]) await run(l, name);
  line("running", { running: await a.running(), done: await b.done() });

  // Queued work waits for capacity that the other limiter frees: b's job, queued while
  // a's holds the only slot, runs once a's ends (told through pub/sub).
  const q = { maxConcurrent: 1, reservoir: null, highWater: null, strategy: Bottleneck.strategy.LEAK };
  await a.updateSettings(q);
  await b.updateSettings(q);
  const order = [];
  let release;
  const first = a.schedule(() => new Promise((r) => { release = () => { order.push("a"); r(); }; }));
  while (!release) await new Promise((r) => setTimeout(r, 5));
  const second = b.schedule(async () => { order.push("b"); });
  line("queued", { running: await a.running() });
  release();
  await Promise.all([first, second]);
  line("order", { order: order.join(",") });
  finished = true;
  await a.disconnect();
  await b.disconnect();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
