import type { BuildOptions } from 'esbuild';

export declare const BROWSER_BUNDLE: Readonly<BuildOptions>;
