// A webhook receiver that verifies every request with the Standard
// Webhooks reference library (npm standardwebhooks), as a kerneld user's
// receiver would. Usage: node receiver.mjs <whsec_ secret>. It listens on
// a free loopback port, prints "listening <port>", then one line per
// request: "verified <webhook-id> <payload type> <payload as one line of
// JSON>" (answered 204) or "rejected <reason>" (answered 401).
import { createServer } from "node:http";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Webhook } = require("standardwebhooks");

const wh = new Webhook(process.argv[2]);
const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    try {
      const payload = wh.verify(body, req.headers);
      console.log(`verified ${req.headers["webhook-id"]} ${payload.type} ${JSON.stringify(payload)}`);
      res.writeHead(204).end();
    } catch (err) {
      console.log(`rejected ${String(err.message).replace(/\s+/g, " ")}`);
      res.writeHead(401).end();
    }
  });
});
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
process.stdin.on("end", () => server.close());
process.stdin.resume();
