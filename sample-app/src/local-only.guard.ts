import type { CanActivate, ExecutionContext } from '@nestjs/common';

/**
 * Lets in requests from this machine only: the sample app's guard for the lock board (a real app
 * would check its own sessions or roles). The demo's load balancer runs on this machine too.
 */
export class LocalOnlyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ socket?: { remoteAddress?: string } }>();
    return ['127.0.0.1', '::1', '::ffff:127.0.0.1'].includes(request.socket?.remoteAddress ?? '');
  }
}
