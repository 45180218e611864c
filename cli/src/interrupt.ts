/**
 * While a streamed run or exec is read: Ctrl-C (SIGINT) leaves it. The gateway then stops the program in the
 * sandbox and charges the seconds it ran; the CLI says so in one line, with the receipt to look up, and exits 130
 * (as a shell does for a program ended by SIGINT). Returns the undo, for when the stream ended by itself.
 */
export function leaveOnInterrupt(what: 'run' | 'exec', receiptId: string | null): () => void {
  const onInt = () => {
    const receipt = receiptId ? `: receipt ${receiptId} (\`svc usage\` lists it)` : '';
    process.stderr.write(`interrupted: the ${what} was stopped in the sandbox and is charged for the seconds it ran${receipt}\n`);
    process.exit(130);
  };
  process.once('SIGINT', onInt);
  return () => process.off('SIGINT', onInt);
}
