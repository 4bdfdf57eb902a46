import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

function statOf(pid: number): { ppid: number; ticks: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) };
  } catch {
    return null;
  }
}

/** CPU seconds used so far by a process and its direct children (nginx's workers), from /proc. */
export function cpuSecondsOf(pid: number): number {
  let ticks = statOf(pid)?.ticks ?? 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const st = statOf(Number(entry));
    if (st && st.ppid === pid) ticks += st.ticks;
  }
  return ticks / TICKS_PER_SECOND;
}
