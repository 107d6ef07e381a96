import { defineBench, log } from "../src/kit/bench";
import { httpLoad, jsonPost } from "../src/kit/http-load";
import { RawClient } from "../src/kit/raw-client";
import { sleep } from "../src/kit/time";
import { perfSteps } from "./perf-steps";
import { PROFILED_TARGETS, sampleWhile, startProfiled } from "./profiled-servers";

export default defineBench({
  name: "publish-profile",
  title: "where a publish's microseconds go, ours (durable and ephemeral rooms) against the bare workerd baseline and PartyServer (perf record)",
  about: `Each target's workerd is started with V8's --perf-basic-prof, rooms get a few subscribers, autocannon publishes
into them over HTTP, and perf record -g samples workerd's on-CPU time (cpu-clock) meanwhile. The samples are split
into steps (load/bench/perf-steps.ts); µs per publish are each step's share of workerd's CPU per publish
(utime+stime over the same window ÷ publishes answered). Needs perf (linux-perf). Build first: npm run build.`,
  options: {
    targets: { default: "ours,ephemeral,bare,bare-durable,partyserver", help: `of ${PROFILED_TARGETS.join(", ")}` },
    rooms: { default: "100", help: "rooms" },
    sockets: { default: "1", help: "subscribers per room" },
    connections: { default: "20", help: "keep-alive connections publishing" },
    seconds: { default: "10", help: "seconds sampled" },
    port: { default: "18731", help: "port of each target in turn" },
  },
  async run(args) {
    const port = args.int("port", { min: 1, max: 65535 });
    const [roomCount, perRoom, connections, seconds] = [args.int("rooms", { min: 1 }), args.int("sockets"), args.int("connections", { min: 1 }), args.number("seconds", { min: 1 })];
    const results = [];
    for (const target of args.list("targets")) {
      const server = await startProfiled(target, port, "profile-");
      const url = `http://127.0.0.1:${port}`;
      const tag = Math.random().toString(36).slice(2, 8);
      const rooms = Array.from({ length: roomCount }, (_, i) => `profile-${tag}-${i}`);
      const requests = rooms.map((room, i) => jsonPost(`/rooms/${room}/publish`, `{"n":${i},"text":"a small message"}`));
      const sockets: RawClient[] = [];
      for (const room of rooms) for (let i = 0; i < perRoom; i++) sockets.push(await new RawClient(`ws://127.0.0.1:${port}/rooms/${room}/ws`, { ack: "none" }).open());
      // Every room exists and the hot paths are optimised before anything is sampled.
      await httpLoad(url, connections, 3, requests);
      await sleep(500);
      const { text, cpuMs: cpu, wallMs, answer: load, perfError: perfErr } = await sampleWhile(server.pid, () => httpLoad(url, connections, seconds, requests));
      const cpuPerPublishUs = (cpu * 1000) / load.ok;
      const profile = perfSteps(text, { bundle: server.bundle });
      const result = {
        target,
        rooms: roomCount,
        socketsPerRoom: perRoom,
        connections,
        publishes: load.ok,
        failed: load.non2xx + load.errors,
        publishesPerSecond: Math.round(load.ok / (wallMs / 1000)),
        serverCpuPerPublishUs: Math.round(cpuPerPublishUs),
        serverCpuPlusMinusUs: Math.round(20_000 / load.ok),
        serverCorePercent: Math.round((cpu / wallMs) * 100),
        samples: profile.samples,
        steps: profile.steps.map((s) => ({ ...s, usPerPublish: Math.round(s.share * cpuPerPublishUs * 10) / 10, ownUs: Math.round((s.own / profile.samples) * cpuPerPublishUs * 10) / 10 })),
        ...(profile.samples === 0 ? { perfError: perfErr.slice(-500) } : {}),
      };
      results.push(result);
      console.log(JSON.stringify(result));
      for (const ws of sockets) ws.cut();
      await server.stop();
      await sleep(1000);
    }
    for (const r of results) {
      log(`\n${r.target}: ${r.publishesPerSecond} publishes/s into ${r.rooms} rooms of ${r.socketsPerRoom} socket(s), ${r.serverCpuPerPublishUs} ± ${r.serverCpuPlusMinusUs} µs of workerd CPU each (${r.serverCorePercent}% of a core), ${r.samples} samples`);
      for (const s of r.steps.filter((x) => x.share >= 0.005)) log(`  ${s.step.padEnd(52)} ${`${(s.share * 100).toFixed(1)}%`.padStart(6)}  ${`${s.usPerPublish} µs`.padStart(9)}  (its own JS ${s.ownUs} µs)`);
    }
  },
});
