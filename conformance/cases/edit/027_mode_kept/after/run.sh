#!/bin/sh
echo goodbye
