import net from 'node:net';

/**
 * A TCP proxy in front of a Redis that can lose one reply: the next reply from Redis that matches a
 * pattern is swallowed and both sides of that connection are closed, as when a connection dies after
 * Redis ran a command but before its reply reached the client. It can also cut connections off (a
 * partition), delay every reply (a slow network) and send new connections to another Redis (a failover
 * behind one address).
 */
export class ReplyDroppingProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  /** The connection to Redis of each client connection, by the client's port. */
  private readonly upstreamOf = new Map<number, net.Socket>();
  private dropNext?: RegExp;
  /** Replies swallowed so far. */
  dropped = 0;
  /** While set, nothing passes either way (a partition: the connections stay open, the bytes wait). */
  private held?: (() => void)[];
  private replyDelayMs = 0;
  /** Which connections' replies the delay is for: every one, or only those not (or only those) in pub/sub mode. */
  private delayed: 'all' | 'commands' | 'subscribers' = 'all';

  private constructor(private upstream: { host: string; port: number }) {
    this.server = net.createServer((client) => this.pipe(client));
  }

  static async start(upstream: { host: string; port: number }): Promise<ReplyDroppingProxy> {
    const proxy = new ReplyDroppingProxy(upstream);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Loses the next reply whose bytes match `pattern`, and the connection it came on. */
  dropNextReply(pattern: RegExp): void {
    this.dropNext = pattern;
  }

  /**
   * Cuts every connection off (`true`: nothing passes either way, the sockets stay open, as in a
   * network partition) or lets them through again (`false`: what waited is delivered, in order).
   */
  cutOff(on: boolean): void {
    if (on) {
      this.held ??= [];
      return;
    }
    const held = this.held ?? [];
    this.held = undefined;
    for (const send of held) send();
  }

  /** Replies reach the clients `ms` later from now on, in order (a slow network); 0: at once again. */
  delayReplies(ms: number): void {
    this.replyDelayMs = ms;
    this.delayed = 'all';
  }

  /**
   * Replies to commands reach the clients `ms` later from now on, while a connection that subscribed
   * gets its messages at once: a client reads a message published after a command ran before the
   * command's reply (on a loaded machine, the two sockets are read in either order).
   */
  delayCommandReplies(ms: number): void {
    this.replyDelayMs = ms;
    this.delayed = 'commands';
  }

  /**
   * Replies on connections that subscribed (the confirmation of a SUBSCRIBE, and the messages) reach
   * the clients `ms` later from now on; other connections' at once: a subscriber slow to be confirmed.
   */
  delaySubscriberReplies(ms: number): void {
    this.replyDelayMs = ms;
    this.delayed = 'subscribers';
  }

  /** Every open connection drops; new ones go to `upstream` (a failover behind one address). */
  switchTo(upstream: { host: string; port: number }): void {
    this.retarget(upstream);
    for (const socket of this.sockets) socket.destroy();
  }

  /** New connections go to `upstream`; the open ones stay where they are (the old master, alive). */
  retarget(upstream: { host: string; port: number }): void {
    this.upstream = upstream;
  }

  /** Disarms a drop that found no matching reply; true when one was still armed. */
  cancelDrop(): boolean {
    const armed = this.dropNext !== undefined;
    this.dropNext = undefined;
    return armed;
  }

  /**
   * The local port of the connection to Redis that carries the client connection from `clientPort`
   * (what CLIENT LIST shows as its addr), once connected.
   */
  upstreamPortFor(clientPort: number): number | undefined {
    return this.upstreamOf.get(clientPort)?.localPort;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private pipe(client: net.Socket): void {
    const server = net.connect(this.upstream.port, this.upstream.host);
    const clientPort = client.remotePort;
    if (clientPort !== undefined) {
      this.upstreamOf.set(clientPort, server);
      server.on('close', () => {
        if (this.upstreamOf.get(clientPort) === server) this.upstreamOf.delete(clientPort);
      });
    }
    for (const socket of [client, server]) {
      this.sockets.add(socket);
      socket.on('close', () => {
        this.sockets.delete(socket);
        client.destroy();
        server.destroy();
      });
      socket.on('error', () => undefined);
    }
    let subscribed = false;
    client.on('data', (data) => {
      if (/subscribe/i.test(data.toString('latin1'))) subscribed = true;
      if (this.held) this.held.push(() => server.write(data));
      else server.write(data);
    });
    server.on('data', (data) => {
      if (this.held) return void this.held.push(() => client.write(data));
      if (this.dropNext?.test(data.toString('latin1'))) {
        this.dropNext = undefined;
        this.dropped++;
        client.destroy();
        server.destroy();
        return;
      }
      if (this.replyDelayMs > 0 && (this.delayed === 'all' || subscribed === (this.delayed === 'subscribers')))
        setTimeout(() => client.write(data), this.replyDelayMs);
      else client.write(data);
    });
  }
}
