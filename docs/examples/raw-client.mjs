// A complete client of the wire protocol in plain JavaScript (browsers; Node with the `ws`
// package): every message once, in order, across disconnects. It follows three rules:
// 1. send "ping" every 25 s;
// 2. ack the last message or presence event read ({"type":"ack","seq":<last seq>,"tag"}) per half window or 50 ms;
// 3. after a close whose code says "reconnect", reconnect with ?since=<last seq>&epoch=<epoch>.
const STOP = new Set([1000, 4000, 4001, 4003]); // the close codes that mean "do not reconnect" (and, by range, 3500-3999, 4500+)

export function followRoom(roomUrl, onMessage, options = {}) {
  const { WebSocket = globalThis.WebSocket, onLost = () => {}, onPresence = () => {} } = options;
  let since = null, epoch = null, stopped = false, socket;
  const connect = () => {
    const url = new URL(roomUrl);
    if (since !== null) { url.searchParams.set("since", since); url.searchParams.set("epoch", epoch); }
    socket = new WebSocket(url);
    let welcome = null, last = null, unacked = 0, ackTimer = null;
    const pinger = setInterval(() => socket.send("ping"), 25_000); // rule 1
    const ack = () => { // rule 2
      clearTimeout(ackTimer), (ackTimer = null), (unacked = 0);
      if (last) socket.send(JSON.stringify({ type: "ack", seq: last.seq, tag: last.tag })), (last = null);
    };
    socket.onmessage = ({ data }) => {
      if (data === "pong") return;
      for (const event of [].concat(JSON.parse(data))) {
        if (event.type === "welcome") { welcome = event; since ??= event.seq; epoch ??= event.epoch; }
        if (event.type === "lost") { since = event.to; if (event.reason === "epoch") epoch = welcome.epoch; onLost(event); }
        if (event.type === "message") { since = event.seq; last = event; onMessage(event); }
        if (event.type === "presence") { last = { seq: since, tag: event.tag }; onPresence(event); }
      }
      unacked += data.length;
      if (unacked * 2 >= welcome.window) ack(); else ackTimer ??= setTimeout(ack, 50);
    };
    socket.onerror = () => {}; // a close always follows
    socket.onclose = ({ code }) => {
      clearInterval(pinger), clearTimeout(ackTimer);
      if (!stopped && !STOP.has(code) && (code < 3500 || code > 3999) && code < 4500) setTimeout(connect, Math.random() * 1000); // rule 3
    };
  };
  connect();
  return { close: () => { stopped = true; socket.close(1000); } };
}
