grep -rn 'TODO' src | sed -E 's/^([^:]+:[0-9]+):.*(TODO.*)$/- \1: \2/' > TODO.md
