import type { ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ExchangeOwner } from './exchange.js';

/**
 * The client's side of a relayed response, shared by the attempts that write it (an answer, then
 * perhaps its continuation): writes their bytes, pausing the replica while the client's socket is
 * full, and starts the owner's stalled-client timer for as long as it stays full.
 */
export class ClientRelay {
  private paused: Dispatcher.DispatchController | null = null;

  constructor(
    private readonly res: ServerResponse,
    private readonly owner: ExchangeOwner<unknown>,
    private readonly stallMs: number,
    /** The client read nothing for stallMs while the replica waited on it. */
    private readonly stalled: () => void,
  ) {}

  private readonly drained = () => {
    this.owner.stall(this.stallMs, null);
    const c = this.paused;
    this.paused = null;
    c?.resume();
  };

  /** Writes to the client; a full socket pauses `controller`'s replica until it drains. */
  write(controller: Dispatcher.DispatchController, bytes: Buffer | string): void {
    if (bytes.length > 0 && !this.res.write(bytes) && this.paused === null) {
      controller.pause();
      this.paused = controller;
      this.owner.stall(this.stallMs, this.stalled);
      this.res.once('drain', this.drained);
    }
  }

  /** The attempt writing broke off: whatever writes next starts unpaused, with no stall timer running. */
  detach(): void {
    this.owner.stall(this.stallMs, null);
    this.res.off('drain', this.drained);
    this.paused = null;
  }
}
