/**
 * A tiny authoritative DNS server on loopback UDP for discovery tests: A and AAAA answers from a
 * table the test changes at will; an unknown name is NXDOMAIN. Only what node's resolver asks
 * (one question per query) is understood.
 */
import { createSocket, type Socket } from 'node:dgram';
import { isIPv4 } from 'node:net';

export interface DnsStub {
  /** `127.0.0.1:port`, for discovery.servers / Resolver.setServers. */
  readonly server: string;
  /** Replaces the addresses of a name (IPv4 and IPv6 mixed). */
  set(name: string, addresses: string[]): void;
  /** Queries answered so far. */
  queries(): number;
  close(): Promise<void>;
}

function ipv6Bytes(ip: string): Buffer {
  const [head, tail = ''] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  const b = Buffer.alloc(16);
  groups.forEach((g, i) => b.writeUInt16BE(parseInt(g, 16), i * 2));
  return b;
}

function readName(msg: Buffer, at: number): { name: string; end: number } {
  const labels: string[] = [];
  let i = at;
  while (msg[i] !== 0) {
    labels.push(msg.subarray(i + 1, i + 1 + msg[i]).toString('ascii'));
    i += msg[i] + 1;
  }
  return { name: labels.join('.').toLowerCase(), end: i + 1 };
}

export async function startDnsStub(): Promise<DnsStub> {
  const table = new Map<string, string[]>();
  let count = 0;
  const sock: Socket = createSocket('udp4');
  sock.on('message', (msg, rinfo) => {
    if (msg.length < 12) return;
    count++;
    const { name, end } = readName(msg, 12);
    const qtype = msg.readUInt16BE(end);
    const question = msg.subarray(12, end + 4);
    const addrs = table.get(name);
    const answers = (addrs ?? []).filter((a) => (qtype === 1 ? isIPv4(a) : qtype === 28 ? !isIPv4(a) : false));
    const head = Buffer.alloc(12);
    head.writeUInt16BE(msg.readUInt16BE(0), 0);
    head.writeUInt16BE(0x8400 | (msg.readUInt16BE(2) & 0x0100) | (addrs === undefined ? 3 : 0), 2); // QR AA (RD) rcode
    head.writeUInt16BE(1, 4);
    head.writeUInt16BE(answers.length, 6);
    const rrs = answers.map((a) => {
      const data = qtype === 1 ? Buffer.from(a.split('.').map(Number)) : ipv6Bytes(a);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      rr.writeUInt16BE(qtype, 2);
      rr.writeUInt16BE(1, 4);
      rr.writeUInt32BE(0, 6); // TTL 0: always asked again
      rr.writeUInt16BE(data.length, 10);
      return Buffer.concat([rr, data]);
    });
    sock.send(Buffer.concat([head, question, ...rrs]), rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  return {
    server: `127.0.0.1:${sock.address().port}`,
    set: (name, addresses) => { table.set(name.toLowerCase(), addresses); },
    queries: () => count,
    close: () => new Promise<void>((r) => sock.close(() => r())),
  };
}
