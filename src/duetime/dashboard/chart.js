// Pure helpers of the dashboard's charts (no DOM, no fetch): imported by app.js and, in the
// tests, straight from the page (import("/dashboard/chart.js")).

// A bucket less elapsed than this share of its step is left out: projected from less, a few
// events would read as a spike (at most ×2 from here on).
export const MIN_PARTIAL = 0.5;

// The timeline's last bucket holds "now": it is partial, and drawn as it is it looks like a
// drop (a cliff) at the right edge. Split it off: `complete` are the buckets that ended;
// `partial` is the last one with the share of its step elapsed (`fraction`, 0..1), or null when
// the last bucket already ended or less than MIN_PARTIAL of it elapsed (then it is omitted).
export function splitPartial(buckets, stepSeconds, nowMs) {
  if (!buckets.length) return { complete: [], partial: null };
  const last = buckets[buckets.length - 1];
  const elapsed = (nowMs - last.t) / (stepSeconds * 1000);
  if (elapsed >= 1) return { complete: buckets, partial: null };
  const complete = buckets.slice(0, -1);
  if (elapsed < MIN_PARTIAL) return { complete, partial: null };
  return { complete, partial: { bucket: last, fraction: elapsed } };
}

// A count in a partial bucket projected to the whole bucket (a rate, so it compares with the
// complete buckets); null stays null (no data).
export function project(value, fraction) {
  if (value === null || value === undefined) return null;
  return value / fraction;
}

// One series of a timeline: `points` from the complete buckets, `partial` the projected point
// of the partial one (drawn dashed), from `pick(bucket)`.
export function timelineSeries(split, pick) {
  const points = split.complete.map((b) => ({ t: b.t, v: pick(b) }));
  const partial = split.partial
    ? { t: split.partial.bucket.t, v: project(pick(split.partial.bucket), split.partial.fraction) }
    : null;
  return { points, partial: partial && partial.v !== null ? partial : null };
}

// Seconds from `startIso` to `endIso` (or to `nowMs` while it has no end); null before a start.
export function durationSeconds(startIso, endIso, nowMs) {
  if (!startIso) return null;
  const end = endIso ? Date.parse(endIso) : nowMs;
  return Math.max(0, (end - Date.parse(startIso)) / 1000);
}

// A `datetime-local` input's value (no zone: read as UTC, like every instant on the dashboard)
// as ISO 8601 with "Z"; "" stays "".
export function utcFromLocalInput(value) {
  if (!value) return "";
  return (value.length === 16 ? `${value}:00` : value) + "Z";
}

// The inverse, for filling the input back from the URL: "2026-11-24T13:20:00Z" → "2026-11-24T13:20".
export function localInputFromUtc(iso) {
  if (!iso) return "";
  return iso.replace(/Z$/, "").replace(/(T\d\d:\d\d):00$/, "$1");
}
