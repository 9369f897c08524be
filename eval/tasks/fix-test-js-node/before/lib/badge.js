'use strict';

const { formatDuration } = require('./duration');

function badgeText(service, upSeconds) {
  if (upSeconds === null) return `${service}: down`;
  return `${service}: up ${formatDuration(upSeconds)}`;
}

module.exports = { badgeText };
