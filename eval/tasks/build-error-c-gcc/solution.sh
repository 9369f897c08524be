sed -i -e 's/max = values\[i\]$/max = values[i];/' -e 's/(double)totl/(double)sum/' stats.c
