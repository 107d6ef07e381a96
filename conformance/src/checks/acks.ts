import { CLOSE_CODES, CloseCode, shouldReconnect } from "../../../protocol/index.js";
import { expect, seqProblem, skip, sleep, type Check } from "../check.js";

/**
 * G5: an ack is a proof of receipt. An ack naming a message this socket was
 * never sent, or with the wrong tag, closes it with 4000 (do not reconnect);
 * the room keeps its messages.
 */
export const forgedAck: Check = {
  id: "G5.forged-ack",
  clause: "G5 acks",
  title: "an ack with the wrong tag or of a message never sent closes the socket with 4000",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.room("");
    const liar = await ctx.openRoom(room, { autoAck: false });
    const future = await ctx.openRoom(room, { autoAck: false });
    await ctx.service.publishOk(room, { i: 1 });
    await liar.waitForMessages(1, 10_000);
    const message = liar.messages()[0]!;
    liar.send({ type: "ack", seq: message.seq, tag: (message.tag + 1) % 0x1_0000_0000 });
    future.send({ type: "ack", seq: 99, tag: 1 });
    const closes = await Promise.all([liar.waitForClose(10_000), future.waitForClose(10_000)]);
    const [wrongTag, neverSent] = closes;
    expect(wrongTag?.code === CloseCode.BAD_FRAME, `an ack with the wrong tag: close ${wrongTag?.code ?? "none"}, expected 4000`);
    expect(neverSent?.code === CloseCode.BAD_FRAME, `an ack of seq 99, never sent: close ${neverSent?.code ?? "none"}, expected 4000`);
    expect(!CLOSE_CODES[CloseCode.BAD_FRAME].reconnect, "4000 must mean: do not reconnect");
    const check = await ctx.openRoom(room, { query: { since: 0 } });
    await check.waitForMessages(1, 10_000);
    return `wrong tag: close 4000 "${wrongTag.reason}"; seq never sent: close 4000 "${neverSent.reason}"; the room still holds seq 1`;
  },
};

/**
 * G5 and G6: the window bounds what the server sends a socket that stops
 * acknowledging (a window plus one frame); a socket that was behind and
 * acknowledges gets every message from history, once and in order; a socket
 * that stays behind is closed with a code that says reconnect (4008), and
 * resuming with `since` gets the rest.
 */
export const slowReader: Check = {
  id: "G6.slow-reader",
  clause: "G6 slow readers",
  title: "the window bounds a silent reader; acking catches up from history; a stalled one is closed to reconnect",
  timeoutMs: 60_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const { window, maxMessageBytes } = ctx.facts;
    if (window === null || maxMessageBytes === null) skip("no socket could be opened to learn the window");
    if (window === 0) skip("the service announces no window (WINDOW_BYTES = 0)");
    if (window > 4 * 1024 * 1024) skip(`the window is ${window} B; filling it would take more traffic than the suite allows (4 MiB)`);
    const room = ctx.room("");
    const size = Math.min(16 * 1024, Math.floor(maxMessageBytes / 2));
    // A window, half a window more, and enough that the last messages cannot fit.
    const count = Math.ceil((window * 1.5) / size) + 4;
    const stalled = await ctx.openRoom(room, { autoAck: false });
    const late = await ctx.openRoom(room, { autoAck: false });
    await stalled.waitForWelcome();
    await late.waitForWelcome();
    const filler = "x".repeat(size - 40);
    for (let i = 1; i <= count; i++) await ctx.service.publishOk(room, { i, filler });
    await sleep(1000);
    // One frame past the window: a frame is at most the larger of a batch (64 KiB by default) and one message.
    const frameBound = Math.max(64 * 1024, maxMessageBytes) + 1024;
    const held = stalled.messageFrameBytes.reduce((a, b) => a + b, 0);
    const heldLate = late.messageFrameBytes.reduce((a, b) => a + b, 0);
    expect(held <= window + frameBound, `a reader that never acked was sent ${held} B, over its window (${window} B) plus one frame`);
    expect(stalled.messages().length < count, `a reader that never acked got all ${count} messages (${held} B): the window did not hold`);
    const stalledAt = stalled.messages().length;

    late.autoAck = true;
    late.ackNow();
    await late.waitForMessages(count, 20_000);
    const lateProblem = seqProblem(late.messages().map((m) => m.seq), 1, count);
    expect(lateProblem === null, `the reader that acked late: ${lateProblem}`);

    const closed = await stalled.waitForClose(40_000);
    expect(closed !== null, "a reader behind and never acking was not closed within 40 s");
    expect(shouldReconnect(closed.code) && closed.code !== CloseCode.NORMAL, `the stalled reader was closed with ${closed.code}, which does not say reconnect`);
    const last = stalled.readSeq.get("") ?? 0;
    const resumed = await ctx.openRoom(room, { query: { since: last, epoch: stalled.welcome()!.epoch } });
    await resumed.waitForMessages(count - last, 20_000);
    const all = [...stalled.messages().map((m) => m.seq), ...resumed.messages().map((m) => m.seq)];
    const problem = seqProblem(all, 1, count);
    expect(problem === null, `the stalled reader across its close and resume: ${problem}`);
    return `window ${window} B, ${count} × ${size} B published: the silent reader held ${held} B (${stalledAt} msgs), the late acker held ${heldLate} B then caught up 1..${count} from history; the silent one was closed ${closed.code} (${CLOSE_CODES[closed.code as keyof typeof CLOSE_CODES]?.name ?? "?"}) after ${(closed.at / 1000).toFixed(1)} s and resumed ${last + 1}..${count} once`;
  },
};
