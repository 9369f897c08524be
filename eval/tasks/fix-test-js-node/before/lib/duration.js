'use strict';

const pad = (n) => String(n).padStart(2, '0');

/**
 * Format a duration in whole seconds for the badge:
 *   59     -> "59s"
 *   3725   -> "1h 02m 05s"
 *   93784  -> "1d 2h 03m 04s"
 * Leading zero units are left out; minutes and seconds after the first unit are two digits.
 */
function formatDuration(totalSeconds) {
  if (!Number.isInteger(totalSeconds) || totalSeconds < 0) {
    throw new RangeError(`not a duration: ${totalSeconds}`);
  }
  const days = Math.floor(totalSeconds / 86400);
  const hours = Math.floor((totalSeconds % 86400) / 3600);
  const minutes = Math.floor(totalSeconds / 60);
  const seconds = totalSeconds % 60;

  if (days > 0) return `${days}d ${hours}h ${pad(minutes)}m ${pad(seconds)}s`;
  if (hours > 0) return `${hours}h ${pad(minutes)}m ${pad(seconds)}s`;
  if (minutes > 0) return `${minutes}m ${pad(seconds)}s`;
  return `${seconds}s`;
}

module.exports = { formatDuration };
