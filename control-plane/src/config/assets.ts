import { z } from 'zod';
import { flag, intWithDefault } from './parse.ts';

/**
 * Asset proofs: attestations of on-chain facts, private NAV and portfolio benchmarks. Chains are the
 * deposit chains of SVC_CHAINS. HTTPS sources (a reserve figure, a price) follow the webhook rules for
 * outbound URLs: public addresses only unless SVC_WEBHOOK_ALLOW_PRIVATE is on; SVC_ASSET_HTTPS_SOURCES=false
 * turns them off, and a record that names one is then UNAVAILABLE (source unconfigured).
 */
export const assetsEnv = {
  /** One price per attestation check or refresh, whatever its result (micro-USD). */
  SVC_ATTESTATION_PRICE_MICRO_USD: intWithDefault(5_000, 0, 1_000_000_000),
  /** Default freshness window of an attestation record; past it, reads report STALE. */
  SVC_ATTESTATION_FRESHNESS_SECONDS: intWithDefault(3_600, 60, 366 * 86_400),
  /** One price per NAV calculation or refresh (micro-USD). */
  SVC_NAV_PRICE_MICRO_USD: intWithDefault(10_000, 0, 1_000_000_000),
  /** Default freshness window of a NAV record and of the prices it declares. */
  SVC_NAV_FRESHNESS_SECONDS: intWithDefault(86_400, 60, 366 * 86_400),
  /** One price per benchmark submission or refresh (micro-USD). */
  SVC_BENCHMARK_PRICE_MICRO_USD: intWithDefault(10_000, 0, 1_000_000_000),
  /** k: peer figures are released only over at least this many participants (and per cell, holders). */
  SVC_BENCHMARK_MIN_COHORT: intWithDefault(5, 3, 1_000),
  /** Reading HTTPS sources (reserve figures, prices); off: such a source is UNAVAILABLE (unconfigured). */
  SVC_ASSET_HTTPS_SOURCES: flag(true),
  /** How long one JSON-RPC or HTTPS read may take. */
  SVC_ASSET_SOURCE_TIMEOUT_SECONDS: intWithDefault(10, 1, 120),
};

export interface AssetsConfig {
  attestationPriceMicroUsd: number;
  attestationFreshnessSeconds: number;
  navPriceMicroUsd: number;
  navFreshnessSeconds: number;
  benchmarkPriceMicroUsd: number;
  benchmarkMinCohort: number;
  httpsSources: boolean;
  sourceTimeoutMs: number;
}

type AssetsEnv = { [K in keyof typeof assetsEnv]: z.infer<(typeof assetsEnv)[K]> };

export function assetsConfig(e: AssetsEnv): AssetsConfig {
  return {
    attestationPriceMicroUsd: e.SVC_ATTESTATION_PRICE_MICRO_USD,
    attestationFreshnessSeconds: e.SVC_ATTESTATION_FRESHNESS_SECONDS,
    navPriceMicroUsd: e.SVC_NAV_PRICE_MICRO_USD,
    navFreshnessSeconds: e.SVC_NAV_FRESHNESS_SECONDS,
    benchmarkPriceMicroUsd: e.SVC_BENCHMARK_PRICE_MICRO_USD,
    benchmarkMinCohort: e.SVC_BENCHMARK_MIN_COHORT,
    httpsSources: e.SVC_ASSET_HTTPS_SOURCES,
    sourceTimeoutMs: e.SVC_ASSET_SOURCE_TIMEOUT_SECONDS * 1000,
  };
}
