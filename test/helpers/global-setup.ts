import { buildWorker } from "../../tools/build-worker.mjs";

/** Builds the worker bundle once; every local server in the run starts with --no-build. */
export default async function setup(): Promise<void> {
  await buildWorker();
}
