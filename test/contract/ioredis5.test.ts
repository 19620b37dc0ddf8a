import { IOREDIS_5 } from '../helpers/client-cells.js';
import { clientCellContract } from './client-cell-contract.js';

clientCellContract(IOREDIS_5);
