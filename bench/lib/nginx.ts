// nginx as the benches run it, one configuration for all of them: consistent hashing (ketama) on a
// session header over the upstreams, HTTP/1.1 keep-alive upstream, no response buffering (so a
// stream is not held back), one worker, everything it writes under one directory of its own.

import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface NginxSite {
  /** From nginxDir(): config, pid, error log and temp files. */
  dir: string;
  port: number;
  /** Base URLs of the upstreams. */
  upstreams: readonly string[];
  /** The request header the hash is taken on (an absent one hashes as the empty key). */
  hashHeader: string;
}

/** A directory for one nginx. Started as root, nginx's worker runs as nobody: it must reach its temp paths. */
export function nginxDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'warmroute-nginx-'));
  chmodSync(dir, 0o755);
  return dir;
}

export function nginxConf(s: NginxSite): string {
  const servers = s.upstreams.map((u) => `    server ${new URL(u).host} max_fails=0;`).join('\n');
  const variable = `$http_${s.hashHeader.toLowerCase().replace(/-/g, '_')}`;
  return `
daemon off;
worker_processes 1;
pid ${s.dir}/nginx.pid;
error_log ${s.dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${s.dir}/body;
  proxy_temp_path ${s.dir}/proxy;
  fastcgi_temp_path ${s.dir}/fcgi;
  uwsgi_temp_path ${s.dir}/uwsgi;
  scgi_temp_path ${s.dir}/scgi;
  upstream replicas {
    hash ${variable} consistent;
${servers}
    keepalive 128;
  }
  server {
    listen 127.0.0.1:${s.port};
    client_max_body_size 64m;
    # Chat bodies (a long history) stay in memory rather than going through a temp file.
    client_body_buffer_size 16m;
    location / {
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 600s;
    }
  }
}
`;
}
