import { expect, seqProblem, type Check } from "../check.js";
import type { Peer } from "../peer.js";

const PUBLISHERS = 4;
const PER_PUBLISHER = 40;

/**
 * G1 and G3 under load: several HTTP publishers at once, two readers that stay
 * and one that drops its connection twice mid-stream and resumes with `since`
 * and `epoch`. Every answer has its own seq, the seqs are 1..n, each reader
 * reads exactly 1..n once in order with the data each publisher was answered
 * for, and each publisher's messages keep the order it published them in.
 */
export const concurrentPublishers: Check = {
  id: "G1.concurrent-publishers",
  clause: "G1 order",
  title: "order and exactly-once under concurrent publishers and a reader resuming mid-stream",
  timeoutMs: 40_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.room("");
    const total = PUBLISHERS * PER_PUBLISHER;
    const stayers = [await ctx.openRoom(room), await ctx.openRoom(room)];
    for (const s of stayers) await s.waitForWelcome();
    const welcome = stayers[0]!.ofType("welcome")[0]!;
    expect("seq" in welcome && welcome.seq === 0, `a new room's welcome had seq ${"seq" in welcome ? welcome.seq : "?"}, not 0`);
    const epoch = welcome.epoch;

    // The resuming reader: every connection's messages, concatenated, must be 1..n once.
    const resumed: number[] = [];
    const resumedData = new Map<number, unknown>();
    let reconnects = 0;
    let mover: Peer = await ctx.openRoom(room);
    const keep = (peer: Peer) => {
      for (const m of peer.messages()) {
        resumed.push(m.seq);
        resumedData.set(m.seq, m.data);
      }
    };
    const drive = (async () => {
      for (const after of [total / 4, (total * 2) / 3]) {
        await mover.waitFor((p) => p.messages().length + resumed.length >= after, 30_000, `${after} messages on the resuming reader`);
        mover.drop();
        keep(mover);
        reconnects++;
        const last = resumed.length ? (resumed[resumed.length - 1] as number) : 0;
        mover = await ctx.openRoom(room, { query: { since: last, epoch } });
      }
      await mover.waitFor((p) => p.messages().length + resumed.length >= total, 30_000, `${total} messages on the resuming reader`);
      keep(mover);
    })();

    const answered = new Map<number, { p: number; i: number }>();
    const perPublisher: number[][] = Array.from({ length: PUBLISHERS }, () => []);
    await Promise.all(
      Array.from({ length: PUBLISHERS }, async (_, p) => {
        for (let i = 0; i < PER_PUBLISHER; i++) {
          const seq = await ctx.service.publishOk(room, { p, i });
          expect(!answered.has(seq), `seq ${seq} was answered to two publishes`);
          answered.set(seq, { p, i });
          perPublisher[p]!.push(seq);
        }
      }),
    );
    const answeredProblem = seqProblem([...answered.keys()].sort((a, b) => a - b), 1, total);
    expect(answeredProblem === null, `publish answers: ${answeredProblem}`);
    for (const [p, seqs] of perPublisher.entries()) {
      expect(seqs.every((s, i) => i === 0 || s > (seqs[i - 1] as number)), `publisher ${p}'s messages got seqs out of its order: ${seqs.join(",")}`);
    }
    await Promise.all(stayers.map((s) => s.waitForMessages(total, 20_000)));
    await drive;

    const readers: [string, number[], (seq: number) => unknown][] = [
      ...stayers.map((s, n): [string, number[], (seq: number) => unknown] => [`reader ${n + 1}`, s.messages().map((m) => m.seq), (seq) => s.messages().find((m) => m.seq === seq)?.data]),
      ["the resuming reader", resumed, (seq) => resumedData.get(seq)],
    ];
    for (const [name, seqs, dataOf] of readers) {
      const problem = seqProblem(seqs, 1, total);
      expect(problem === null, `${name}: ${problem}`);
      for (const [seq, sent] of answered) {
        expect(JSON.stringify(dataOf(seq)) === JSON.stringify(sent), `${name}: seq ${seq} carried ${JSON.stringify(dataOf(seq))}, but was answered for ${JSON.stringify(sent)}`);
      }
    }
    return `${total} messages from ${PUBLISHERS} concurrent publishers got seqs 1..${total}; 2 readers and 1 that resumed ${reconnects}× with since read 1..${total} once each, in order, data as answered`;
  },
};
