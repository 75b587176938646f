// clients/node-redis.js ADDR: one RL.LIMIT, then two in one MULTI/EXEC, through node-redis.
const { createClient } = require("redis");

async function main(addr) {
  // RESP2 by default; RESP: 3 works too (RL.LIMIT's reply is an array in both).
  const client = createClient({ url: `redis://${addr}` });
  client.on("error", (err) => console.error(err));
  await client.connect();
  try {
    // allowed, limit, remaining, retry_after_ms, reset_after_ms
    const reply = await client.sendCommand(["RL.LIMIT", "user:42", "10", "1h"]);
    console.log(reply.join(" "));
    // MULTI, RL.LIMIT, RL.LIMIT, EXEC: both decided at one instant.
    const results = await client.multi()
      .addCommand(["RL.LIMIT", "user:42", "10", "1h"])
      .addCommand(["RL.LIMIT", "user:42", "10", "1h"])
      .exec();
    for (const r of results) console.log(r.join(" "));
  } finally {
    await client.close();
  }
}

main(process.argv[2]).catch((err) => {
  console.error(err);
  process.exit(1);
});
