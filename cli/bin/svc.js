#!/usr/bin/env node
// Launcher for `svc`: registers tsx's loader in this process, then runs the TypeScript entry point.
import { register } from 'tsx/esm/api';

register();
await import(new URL('../src/main.ts', import.meta.url).href);
