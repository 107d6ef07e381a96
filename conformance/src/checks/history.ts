import type { HistoryMessage, HistoryPage, ServerMessage } from "../../../protocol/index.js";
import { expect, type Check } from "../check.js";

/**
 * G2: an accepted publish is in history, at the seq it was answered with,
 * with the data it was sent with; the history pages hold exactly what a
 * socket was delivered (seq, ts and data), forward in one page and backward
 * page by page through cursors; a page of another epoch is 409 and a room
 * that holds nothing is 404.
 */
export const historyMatchesDelivery: Check = {
  id: "G2.history-equals-delivery",
  clause: "G2 accepted",
  title: "every accepted publish is in history as delivered (forward page, backward cursor pages)",
  timeoutMs: 30_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.room("");
    const reader = await ctx.openRoom(room);
    await reader.waitForWelcome();
    const sent: [number, unknown][] = [];
    const values: unknown[] = [{ n: 1 }, [1, 2, 3], "text", 42, null, true, { nested: { é: "ü", emoji: "🙂" } }];
    for (let i = 0; i < 21; i++) {
      const value = values[i % values.length];
      if (i % 5 === 4) {
        // Not JSON: delivered as the body's text.
        const answer = await ctx.service.publish(room, undefined, { body: `plain ${i}`, contentType: "text/plain" });
        expect(answer.status === 200 && answer.json, `a text publish answered ${answer.status}`);
        sent.push([answer.json.seq, `plain ${i}`]);
      } else {
        sent.push([await ctx.service.publishOk(room, value), value]);
      }
    }
    await reader.waitForMessages(sent.length, 10_000);
    const delivered = reader.messages();
    for (const [seq, data] of sent) {
      const got = delivered.find((m) => m.seq === seq);
      expect(JSON.stringify(got?.data) === JSON.stringify(data), `seq ${seq}: delivered ${JSON.stringify(got?.data)}, published ${JSON.stringify(data)}`);
    }
    const same = (what: string, page: HistoryMessage[], socket: ServerMessage[]) => {
      expect(page.length === socket.length, `${what}: ${page.length} messages, the socket got ${socket.length}`);
      page.forEach((m, i) => {
        const d = socket[i] as ServerMessage;
        expect(m.seq === d.seq && m.ts === d.ts && JSON.stringify(m.data) === JSON.stringify(d.data), `${what}: seq ${m.seq} is ${JSON.stringify(m).slice(0, 120)}, the socket got ${JSON.stringify({ seq: d.seq, ts: d.ts, data: d.data }).slice(0, 120)}`);
      });
    };
    const forward = await ctx.service.history(room, "after=0&limit=1000");
    expect(forward.status === 200 && forward.json, `GET messages?after=0 answered ${forward.status}: ${forward.text.slice(0, 120)}`);
    expect(forward.json.direction === "forward" && forward.json.lost === null && forward.json.cursor === null, `the forward page: direction ${forward.json.direction}, lost ${JSON.stringify(forward.json.lost)}, cursor ${forward.json.cursor}`);
    same("the forward page", forward.json.messages, delivered);

    const backward: HistoryMessage[] = [];
    let query = "limit=4";
    let pages = 0;
    for (;;) {
      const page = await ctx.service.history(room, query);
      const body = page.json as HistoryPage | undefined;
      expect(page.status === 200 && body, `a backward page answered ${page.status}: ${page.text.slice(0, 120)}`);
      expect(body.messages.length <= 4, `a page of limit 4 held ${body.messages.length}`);
      backward.push(...body.messages);
      pages++;
      if (body.cursor === null || pages > 20) break;
      query = `cursor=${encodeURIComponent(body.cursor)}&limit=4`;
    }
    same("the backward pages, reversed", backward.reverse(), delivered);

    const epoch = forward.json.epoch;
    const foreign = await ctx.service.history(room, "after=0&epoch=conformance-another-history");
    expect(foreign.status === 409 && foreign.isJson && (foreign.json as { error?: string } | undefined)?.error === "conflict", `a page of another epoch answered ${foreign.status} ${foreign.text.slice(0, 80)}, not 409 conflict`);
    const empty = await ctx.service.history(ctx.room("never-used"), "");
    expect(empty.status === 404 && (empty.json as { error?: string } | undefined)?.error === "not_found", `a room never used answered ${empty.status} ${empty.text.slice(0, 80)}, not 404 not_found`);
    return `${sent.length} accepted publishes (JSON values and text) delivered and in history as delivered (seq, ts, data): 1 forward page, ${pages} backward cursor pages; epoch ${epoch.slice(0, 8)}…; another epoch 409, an unused room 404`;
  },
};
