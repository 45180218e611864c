import type { FastifyInstance } from 'fastify';
import type { SandboxDeps } from './deps.ts';
import { sandboxRunRoutes } from './routes-runs.ts';
import { sandboxSessionRoutes } from './routes-sessions.ts';
import { sessionTerminalRoutes } from './routes-terminal.ts';
import { terminalRoutes } from './terminal.ts';

export function sandboxRoutes(app: FastifyInstance, d: SandboxDeps): void {
  sandboxRunRoutes(app, d);
  sandboxSessionRoutes(app, d);
  sessionTerminalRoutes(app, d);
  terminalRoutes(app, d);
}
