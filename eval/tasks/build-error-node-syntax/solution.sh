sed -i 's/toFixed(1)}%`$/toFixed(1)}%`,/' report.js
