import { defineConfig } from 'vitest/config';

// One configuration for the whole workspace: unit tests beside the code, end-to-end tests in test/.
export default defineConfig({
  test: {
    include: ['shared/src/**/*.test.ts', 'control-plane/src/**/*.test.ts', 'node-agent/src/**/*.test.ts', 'cli/src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
