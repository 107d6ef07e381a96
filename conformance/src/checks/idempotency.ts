import { randomUUID } from "node:crypto";
import { expect, sleep, type Check } from "../check.js";

/**
 * G7 over HTTP: a publish retried with its Idempotency-Key (and the same
 * body, in any JSON spelling) is answered with the first seq and
 * `duplicate: true` and delivered once; the key with another body is 409
 * `conflict`, a JSON refusal.
 */
export const idempotentHttp: Check = {
  id: "G7.idempotent-http",
  clause: "G7 idempotent publishes",
  title: "Idempotency-Key retried: same seq, duplicate:true, one delivery; other body 409 conflict",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.room("");
    const reader = await ctx.openRoom(room);
    await reader.waitForWelcome();
    const key = `conformance-${randomUUID()}`;
    const first = await ctx.service.publish(room, undefined, { key, body: '{"order":1,"item":"a"}' });
    expect(first.status === 200 && first.json && first.json.duplicate === undefined, `the first keyed publish answered ${first.status} ${first.text.slice(0, 120)}`);
    const seq = first.json.seq;
    const retry = await ctx.service.publish(room, undefined, { key, body: '{"order":1,"item":"a"}' });
    expect(retry.status === 200 && retry.json?.seq === seq && retry.json.duplicate === true && retry.json.recipients === 0, `the retry answered ${retry.status} ${retry.text.slice(0, 120)}, expected seq ${seq}, duplicate true, recipients 0`);
    const respaced = await ctx.service.publish(room, undefined, { key, body: '{ "order": 1, "item": "a" }' });
    expect(respaced.status === 200 && respaced.json?.seq === seq && respaced.json.duplicate === true, `the retry spelt with spaces answered ${respaced.status} ${respaced.text.slice(0, 120)}`);
    const conflict = await ctx.service.publish(room, undefined, { key, body: '{"order":2}' });
    const error = conflict.json as { error?: string; message?: string } | undefined;
    expect(conflict.status === 409 && conflict.isJson && error?.error === "conflict" && typeof error.message === "string", `the key with another body answered ${conflict.status} ${conflict.text.slice(0, 120)}, not 409 {"error":"conflict"}`);
    const marker = await ctx.service.publishOk(room, { marker: true });
    await reader.waitFor((p) => p.messages().some((m) => m.seq === marker), 10_000, `the marker seq ${marker}`);
    await sleep(200);
    const seqs = reader.messages().map((m) => m.seq);
    expect(JSON.stringify(seqs) === JSON.stringify([seq, marker]) && marker === seq + 1, `the reader got seqs ${seqs.join(",")}, expected ${seq},${seq + 1}: a retry was delivered or published again`);
    return `first: seq ${seq}; 2 retries: seq ${seq}, duplicate true, recipients 0; other body: 409 conflict; the reader got ${seq} once, then the marker ${marker}`;
  },
};

/**
 * G7 over a socket: a publish frame sent again with its `key` is answered
 * `published` with the first seq and `duplicate: true`, and sent once; the
 * key with other data is an `error` `conflict` and the socket stays.
 */
export const idempotentSocket: Check = {
  id: "G7.idempotent-socket",
  clause: "G7 idempotent publishes",
  title: "a socket publish sent again with its key: same seq, duplicate; other data conflict, socket stays",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPublishKey: false,
  async run(ctx) {
    const room = ctx.room("");
    const publisher = await ctx.openRoom(room);
    const reader = await ctx.openRoom(room);
    await publisher.waitForWelcome();
    const key = `conformance-${randomUUID()}`;
    const answers = (id: string) => publisher.events.filter((e) => (e.type === "published" || e.type === "error") && "id" in e && e.id === id);
    publisher.send({ type: "publish", data: { n: 1 }, id: "p1", key });
    await publisher.waitFor(() => answers("p1").length > 0, 10_000, "the answer to p1");
    const first = answers("p1")[0]!;
    expect(first.type === "published" && !first.duplicate, `the first keyed publish was answered ${JSON.stringify(first)}`);
    publisher.send({ type: "publish", data: { n: 1 }, id: "p2", key });
    await publisher.waitFor(() => answers("p2").length > 0, 10_000, "the answer to p2");
    const second = answers("p2")[0]!;
    expect(second.type === "published" && second.seq === first.seq && second.duplicate === true, `the publish sent again was answered ${JSON.stringify(second)}, expected seq ${first.seq}, duplicate true`);
    publisher.send({ type: "publish", data: { n: 2 }, id: "p3", key });
    await publisher.waitFor(() => answers("p3").length > 0, 10_000, "the answer to p3");
    const third = answers("p3")[0]!;
    expect(third.type === "error" && third.code === "conflict", `the key with other data was answered ${JSON.stringify(third)}, expected error conflict`);
    publisher.send({ type: "publish", data: { n: 3 }, id: "p4" });
    await publisher.waitFor(() => answers("p4").length > 0, 10_000, "the answer to p4: the socket should have stayed");
    const fourth = answers("p4")[0]!;
    expect(fourth.type === "published" && fourth.seq === first.seq + 1, `a publish after the conflict was answered ${JSON.stringify(fourth)}, expected seq ${first.seq + 1}`);
    await reader.waitForMessages(2, 10_000);
    await sleep(200);
    const seqs = reader.messages().map((m) => m.seq);
    expect(JSON.stringify(seqs) === JSON.stringify([first.seq, first.seq + 1]), `the reader got seqs ${seqs.join(",")}, expected ${first.seq},${first.seq + 1}`);
    return `keyed publish: seq ${first.seq}; sent again: seq ${second.seq}, duplicate true; other data: error conflict, socket open; the reader got ${seqs.join(",")}`;
  },
};
