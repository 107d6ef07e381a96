import { logEvent } from "../common/log";

/** The part of a Workers Analytics Engine dataset binding the worker uses. */
interface DataPointSink {
  writeDataPoint(point: AnalyticsEngineDataPoint): void;
}

function sinkOf(env: Record<string, unknown>): DataPointSink | null {
  const binding = env.ANALYTICS as Partial<DataPointSink> | undefined;
  return binding && typeof binding.writeDataPoint === "function" ? (binding as DataPointSink) : null;
}

let failureLogged = false;

/**
 * Writes one Analytics Engine data point per HTTP publish when the ANALYTICS
 * binding exists: blob1 = room, double1 = recipients, double2 = message bytes,
 * index1 = room (the sampling key, so busy rooms do not drown quiet ones).
 * Without the binding it does nothing; it never fails a publish.
 */
export function recordPublish(env: Record<string, unknown>, room: string, recipients: number, bytes: number): void {
  const sink = sinkOf(env);
  if (!sink) return;
  try {
    sink.writeDataPoint({ blobs: [room], doubles: [recipients, bytes], indexes: [room] });
  } catch (error) {
    // writeDataPoint does not throw in normal operation; a misconfigured binding should not flood the log.
    if (!failureLogged) {
      failureLogged = true;
      logEvent("error", { where: "analytics", room, error: String(error) });
    }
  }
}
