sed -i 's/^if \[ "\$total_errors" -gt 0 \]$/if [ "$total_errors" -gt 0 ]; then/' report.sh
