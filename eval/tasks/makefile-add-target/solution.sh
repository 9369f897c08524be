sed -i 's/^\.PHONY: run$/.PHONY: run clean/' Makefile
printf '\nclean:\n\trm -f app $(OBJS)\n' >> Makefile
