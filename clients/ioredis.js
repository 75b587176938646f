// clients/ioredis.js ADDR: one RL.LIMIT, then two in one MULTI/EXEC, through ioredis.
const Redis = require("ioredis");

async function main(addr) {
  const [host, port] = addr.split(":");
  // A request in flight when the connection drops may have been counted: never resend it.
  const redis = new Redis({ host, port: Number(port), autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0 });
  try {
    // allowed, limit, remaining, retry_after_ms, reset_after_ms
    const reply = await redis.call("RL.LIMIT", "user:42", "10", "1h");
    console.log(reply.join(" "));
    // MULTI, RL.LIMIT, RL.LIMIT, EXEC: both decided at one instant.
    const results = await redis.multi().call("RL.LIMIT", "user:42", "10", "1h").call("RL.LIMIT", "user:42", "10", "1h").exec();
    for (const [err, r] of results) {
      if (err) throw err;
      console.log(r.join(" "));
    }
  } finally {
    redis.disconnect();
  }
}

main(process.argv[2]).catch((err) => {
  console.error(err);
  process.exit(1);
});
