import { connect } from 'node:net';

/** Writes raw bytes to the gateway and returns everything it answers until it closes or goes quiet. */
export function rawExchange(port: number, bytes: string | Buffer, quietMs = 300): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => s.write(bytes));
    let got = '';
    let timer = setTimeout(() => s.destroy(), quietMs * 10);
    s.on('data', (d) => {
      got += d.toString('latin1');
      clearTimeout(timer);
      timer = setTimeout(() => s.destroy(), quietMs);
    });
    s.on('close', () => { clearTimeout(timer); resolve(got); });
    s.on('error', () => {});
  });
}

