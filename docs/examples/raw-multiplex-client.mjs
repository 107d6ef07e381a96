// A complete client of the multiplexed connection (GET /ws) in plain JavaScript: many rooms on one
// socket, each room's messages once and in order across disconnects. The three rules of one room,
// with the room named:
// 1. send "ping" every 25 s;
// 2. ack the last message or presence event read ({"type":"ack","room","seq","tag"}) per half window
//    or 50 ms: it releases everything sent before it, of every room;
// 3. on every open (after a close whose code says "reconnect"), subscribe to each room with its since and epoch.
const STOP = new Set([1000, 4000, 4001, 4003]); // the close codes that mean "do not reconnect" (and, by range, 3500-3999, 4500+)

export function followRooms(url, rooms, onMessage, options = {}) {
  const { WebSocket = globalThis.WebSocket, onLost = () => {}, onPresence = () => {}, onRefused = () => {} } = options;
  const at = new Map(rooms.map((room) => [room, { since: undefined, epoch: undefined }]));
  let stopped = false, socket;
  const connect = () => {
    socket = new WebSocket(url);
    let window = 0, last = null, unacked = 0, ackTimer = null;
    const pinger = setInterval(() => socket.send("ping"), 25_000); // rule 1
    const ack = () => { // rule 2
      clearTimeout(ackTimer), (ackTimer = null), (unacked = 0);
      if (last) socket.send(JSON.stringify({ type: "ack", ...last })), (last = null);
    };
    const subscribe = (room) => socket.send(JSON.stringify({ type: "subscribe", room, ...at.get(room) }));
    const retry = (room, s = socket) => setTimeout(() => s === socket && s.readyState === 1 && subscribe(room), 1000);
    socket.onopen = () => at.forEach((_, room) => subscribe(room)); // rule 3
    socket.onmessage = ({ data }) => {
      if (data === "pong") return;
      for (const event of [].concat(JSON.parse(data))) {
        const room = at.get(event.room);
        if (event.type === "welcome") window = event.window;
        if (!room) continue;
        if (event.type === "subscribed") { room.since ??= event.seq; room.epoch = event.epoch; }
        if (event.type === "lost") { room.since = event.to; onLost(event); }
        if (event.type === "message") { room.since = event.seq; last = { room: event.room, seq: event.seq, tag: event.tag }; onMessage(event); }
        if (event.type === "presence") { last = { room: event.room, seq: room.since, tag: event.tag }; onPresence(event); }
        if (event.type === "error" && (event.code === "rate_limited" || event.code === "internal")) retry(event.room);
        else if (event.type === "error" || event.type === "unsubscribed") { at.delete(event.room); onRefused(event); }
      }
      unacked += data.length;
      if (unacked * 2 >= window) ack(); else ackTimer ??= setTimeout(ack, 50);
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
