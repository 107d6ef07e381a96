import type { TimelineSample } from "../target/sampler";

/**
 * One live status line on stderr: rewritten in place on a terminal, printed
 * every few seconds otherwise (CI logs stay readable).
 */
export class ProgressLine {
  private previous: TimelineSample | undefined;
  private lastPrintedAt = 0;
  private readonly tty = process.stderr.isTTY === true;
  private extra = "";

  constructor(
    private readonly label: string,
    private readonly enabled: boolean,
  ) {}

  /** Scenario-specific tail of the line (e.g. published count). */
  setExtra(text: string): void {
    this.extra = text;
  }

  update(sample: TimelineSample): void {
    const prev = this.previous;
    this.previous = sample;
    if (!this.enabled || !prev) return;
    const now = Date.now();
    if (!this.tty && now - this.lastPrintedAt < 5000) return;
    this.lastPrintedAt = now;
    const dt = (sample.t - prev.t) / 1000 || 1;
    const parts = [`[${this.label} ${sample.phase}] ${(sample.t / 1000).toFixed(1)}s`];
    if (sample.client && prev.client) {
      parts.push(`open ${sample.client.open}`);
      parts.push(`hs/s ${Math.round((sample.client.handshakes - prev.client.handshakes) / dt)}`);
      parts.push(`msg/s ${Math.round((sample.client.events - prev.client.events) / dt)}`);
      if (sample.client.failures) parts.push(`fail ${sample.client.failures}`);
      if (sample.client.reconnecting) parts.push(`reconnecting ${sample.client.reconnecting}`);
      parts.push(`client cpu ${Math.round(((sample.client.cpuUs - prev.client.cpuUs) / 1e6 / dt) * 100)}%`);
    }
    if (sample.server && prev.server) {
      parts.push(`server cpu ${Math.round(((sample.server.cpuUs - prev.server.cpuUs) / 1e6 / dt) * 100)}%`);
      parts.push(`rss ${Math.round(sample.server.rssBytes / 1048576)} MB`);
      parts.push(`fds ${sample.server.fds}`);
    }
    parts.push(`machine ${Math.round(sample.machineBusy * 100)}%`);
    // The rates above are averages since the previous sample, not over the run: say over how long.
    parts.push(`(rates over ${dt.toFixed(1)} s)`);
    if (this.extra) parts.push(this.extra);
    const line = parts.join("  ");
    if (this.tty) process.stderr.write(`\r\x1b[K${line.slice(0, (process.stderr.columns || 200) - 1)}`);
    else process.stderr.write(`${line}\n`);
  }

  /** Ends the in-place line so later output starts on a fresh one. */
  finish(): void {
    if (this.enabled && this.tty) process.stderr.write("\n");
  }
}
