// Starts `invar serve --port 0 ARGS` for the node tests and waits for its "ready on port N" line
// (60 s at most): resolves to { proc, port, log() }, rejects with the server's log.
import { spawn } from 'node:child_process';

export function startServer(bin, args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(bin, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => reject(new Error('server did not start:\n' + log)), 60000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/ready on port (\d+)/);
      if (m) { clearTimeout(timer); resolve({ proc, port: Number(m[1]), log: () => log }); }
    });
    proc.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
  });
}
