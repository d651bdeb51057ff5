import type { GrpcServer } from './server.js';

/**
 * Lets clients call services of the same process directly instead of over loopback gRPC
 * (HUB_TRANSPORT=inproc in the all-in-one mode). Calls still go through each service's
 * handlers, deadlines, metrics and error mapping; only the sockets, HTTP/2 framing and
 * protobuf encoding are skipped. Services register the server they listen with; a client
 * given the transport uses the server registered at its address, else the network.
 */
export class LocalTransport {
  private readonly servers = new Map<string, GrpcServer>();

  register(address: string, server: GrpcServer): void {
    this.servers.set(address, server);
  }

  serverAt(address: string): GrpcServer | undefined {
    return this.servers.get(address);
  }
}
